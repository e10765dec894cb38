"""Benchmarks run against an embedded, throwaway Loci (`python -m bench.<name> --help`)."""
