"""tailtriage.analyses"""
