# Sourced by scripts/run and scripts/test: the system packages coffre needs beside Python, installed
# with apt-get when missing (as root on Debian or Ubuntu); elsewhere one line says what is missing.
_apt_updated=""
need() {  # need COMMAND PACKAGE WHY: install PACKAGE when COMMAND is missing
  local command=$1 package=$2 why=$3
  command -v "$command" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    if [ -z "$_apt_updated" ]; then apt-get update -qq >/dev/null; _apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null && return 0
  fi
  echo "warning: $command is not installed (package $package): $why" >&2
}
# Apache Kafka, coffre up's broker and the pipeline tests', runs on a JVM from jars Maven fetches once.
need_kafka() {
  need java default-jre-headless "coffre up falls back to the memory-only broker; the pipeline tests fail under CI"
  need mvn maven "Apache Kafka's jars cannot be fetched (or set COFFRE_KAFKA_HOME to an unpacked release)"
}
# PostgreSQL's server programs (initdb, postgres), for the tests of the console's index on PostgreSQL
# (tests/postgres.py runs its own server): Debian keeps them off the PATH, in /usr/lib/postgresql/*/bin.
need_postgresql() {
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && return 0
  command -v initdb >/dev/null 2>&1 && return 0
  need initdb postgresql "the console index's PostgreSQL tests are skipped (they fail under CI)"
}
