"""Static word embeddings: unsupervised cross-lingual mapping (VecMap) and neighbour tables built from it."""
