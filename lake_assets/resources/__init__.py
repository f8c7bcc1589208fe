"""The lake's resources: storage, engines, rules, and the servers they start."""
