"""Dagster resource wrapping the core ``Services`` (database, Qdrant store, embedder)."""

import dagster as dg
from pydantic import ValidationError
from pydantic_settings import SettingsError

from ragaudit.platform.settings import Settings
from ragaudit.services import Services, get_services, services_by_key


class RagauditResource(dg.ConfigurableResource):
    """Hands the assets the process's shared ``Services``.

    ``services_key`` is set by the in-process runner (``ragaudit.pipelines.runner``) so a run started by
    the API or CLI uses the very objects of that process (Qdrant local mode allows one client
    per folder). Empty (Dagster UI / ``dagster asset materialize``): settings come from the
    ``RAGAUDIT_*`` environment.
    """

    services_key: str = ""

    def services(self) -> Services:
        if self.services_key:
            return services_by_key(self.services_key)
        return get_services(Settings())


def environment_settings() -> Settings:
    """The settings of the ``RAGAUDIT_*`` environment as the definitions load (the sensor's interval,
    the schedule's cron); the defaults when they are invalid (the API validates the same settings
    at start and refuses to start, saying which one is wrong)."""
    try:
        return Settings()
    except (ValidationError, SettingsError, ValueError):
        return Settings.model_construct()
