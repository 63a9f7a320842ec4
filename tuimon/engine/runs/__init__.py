"""What the commands run: a pair's plan, sweeps, fail-fast, scheduler submission."""
