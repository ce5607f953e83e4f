"""Test harnesses that are part of the package, for tests and experiments to share."""
