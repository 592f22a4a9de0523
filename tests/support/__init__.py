"""Helpers the test modules share (no test module imports another): parsing IR as the tools do."""
