"""Measurement: counters polled into time series (`monitor`), the algorithms' own state (`ccstate`),
fairness and loss statistics (`metrics`), and the live terminal view (`live`)."""
