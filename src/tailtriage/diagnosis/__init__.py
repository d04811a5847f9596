"""tailtriage.diagnosis"""
