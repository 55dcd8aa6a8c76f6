"""Removal: v2 metadata, chunk files, and the markers a killed run leaves."""
