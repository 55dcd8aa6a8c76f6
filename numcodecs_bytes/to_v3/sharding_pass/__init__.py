"""The sharding pass: rounds of arrays planned, packed, checked, switched and cleared."""
