"""Simulated OpenAI-compatible engine servers (``tailtriage serve-sim``)."""
