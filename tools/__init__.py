"""Developer tools: what `make schema` generates from the models and the stack files."""
