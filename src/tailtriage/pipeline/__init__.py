"""Wiring: the only package (with ``cli``) that sees every stage of the pipeline."""
