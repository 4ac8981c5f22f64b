"""fedhh.mechanisms"""
