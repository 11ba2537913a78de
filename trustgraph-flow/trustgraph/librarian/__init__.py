"""The librarian: documents per user and collection, and the front of ingestion."""
