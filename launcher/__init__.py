"""tfcompose launcher: inventory → render → remote (SSH) → images → cluster."""
