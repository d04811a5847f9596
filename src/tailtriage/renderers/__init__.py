"""tailtriage.renderers"""
