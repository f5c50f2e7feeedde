-- A separate database for Dagster's run/event storage.
CREATE DATABASE dagster OWNER ragaudit;
