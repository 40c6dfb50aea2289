"""What the tests share: providers, fault workers, servers they start, readers and helpers."""
