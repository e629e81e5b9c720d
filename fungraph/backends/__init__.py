"""Execution engines for planned graphs."""
