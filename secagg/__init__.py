"""fedhh.secagg"""
