"""The API's endpoints, one module per noun: sessions, runs, live clients, events, auth."""
