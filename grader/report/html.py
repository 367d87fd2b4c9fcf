"""A Page (grader/report/blocks.py) as a self-contained HTML page, through the jinja2 templates in
grader/report/templates/ (autoescape on: every text a submission controls, its test names and outputs included,
is escaped; images are data URIs, so the page loads nothing from anywhere)."""

from __future__ import annotations

from functools import lru_cache

import jinja2

from grader.report.blocks import Page


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("grader.report", "templates"),
        autoescape=True,  # every template here is HTML
        undefined=jinja2.StrictUndefined,  # a typo in a template fails loudly, in the tests
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(page: Page, template: str = "page.html.j2") -> str:
    return environment().get_template(template).render(page=page)
