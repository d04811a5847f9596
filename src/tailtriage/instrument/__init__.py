"""Instrument: the configs that make a serving stack triage-ready."""
