"""Shim for tools that still call setup.py; everything is in setup.cfg."""

from setuptools import setup

setup()
