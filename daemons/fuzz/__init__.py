"""Fuzzing htcpool: hypothesis strategies, targets, and campaigns (htcpool bench fuzz)."""
