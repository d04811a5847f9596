"""tailtriage.simulator"""
