"""fedhh.shuffler"""
