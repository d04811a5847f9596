"""tailtriage.remediation"""
