"""tailtriage.loadgen"""
