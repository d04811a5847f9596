"""tailtriage.sources"""
