"""Slow reference implementations that the product's fast paths are tested equal to."""
