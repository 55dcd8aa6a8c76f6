"""The metadata pass: nodes read, settled, checked, and their zarr.json written."""
