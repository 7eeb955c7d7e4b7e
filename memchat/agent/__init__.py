"""The chat loop, independent of any UI: models, the runner and its events."""
