"""FastAPI dependencies as ``Annotated`` aliases (one place)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from core.query import QueryService
from core.services import Services
from core.settings import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_services_dep(request: Request) -> Services:
    return request.app.state.services


def get_query_service(request: Request) -> QueryService:
    return request.app.state.query_service


SettingsDep = Annotated[Settings, Depends(get_settings)]
ServicesDep = Annotated[Services, Depends(get_services_dep)]
QueryServiceDep = Annotated[QueryService, Depends(get_query_service)]
