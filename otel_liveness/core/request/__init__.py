"""One request across its attempts: the engine, its states, the facts read from the request and the ending report."""
