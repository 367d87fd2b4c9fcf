"""Trusted reference code: one folder per problem (spec.yaml, reference.py, staff solutions)."""
