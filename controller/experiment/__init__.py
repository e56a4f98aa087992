"""Experiments: `preflight` checks, `build` sets up and tears down, `runner` runs one start to end;
`sweep` runs a grid of them, through an `executors` executor."""
