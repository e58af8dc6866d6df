"""Placeholder until the conformance plugin lands."""
