"""The model front end: GGUF reading and checks, the step's IR, sidecar export, the model cache, the tokenizer."""
