"""Downstream tasks built on the multilingual Bible data."""
