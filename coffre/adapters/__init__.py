"""Adapters: the outside world (files, Kafka, the broker) behind small interfaces."""
