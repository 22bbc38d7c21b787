"""A run's calls in time order: (run, ts) replaces (run, step) on tool and model calls.

The run page reads a run's first calls ordered by time. With only (run, step), PostgreSQL either
sorts every call of the run (seconds for a run with millions) or walks the whole table's time
index hoping to meet the run's rows. (run, ts) answers it from the index, and serves every
lookup by run that (run, step) served (nothing orders or filters by step), so ingest still
maintains the same number of indexes.

On PostgreSQL the index is built CONCURRENTLY (no lock on inserts while it builds: migrations run
as the stack starts, beside live ingest) before the old one is dropped; elsewhere (SQLite in the
demo) the ordinary operations run.
"""

from django.db import migrations, models

CHANGES = [
    ("toolcall", "toolcall_run_step_idx", "toolcall_run_ts_idx"),
    ("modelcall", "modelcall_run_step_idx", "modelcall_run_ts_idx"),
]


def _swap(apps, schema_editor, *, old_fields, new_fields, reverse):
    for model_name, old_name, new_name in CHANGES:
        model = apps.get_model("runs", model_name)
        if reverse:
            old_name, new_name = new_name, old_name
        new = models.Index(fields=new_fields, name=new_name)
        old = models.Index(fields=old_fields, name=old_name)
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.add_index(model, new, concurrently=True)
            schema_editor.remove_index(model, old, concurrently=True)
        else:
            schema_editor.add_index(model, new)
            schema_editor.remove_index(model, old)


def forwards(apps, schema_editor):
    _swap(apps, schema_editor, old_fields=["run", "step"], new_fields=["run", "ts"], reverse=False)


def backwards(apps, schema_editor):
    _swap(apps, schema_editor, old_fields=["run", "ts"], new_fields=["run", "step"], reverse=True)


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("runs", "0005_run_source"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="toolcall", name="toolcall_run_step_idx"),
                migrations.AddIndex(
                    model_name="toolcall",
                    index=models.Index(fields=["run", "ts"], name="toolcall_run_ts_idx"),
                ),
                migrations.RemoveIndex(model_name="modelcall", name="modelcall_run_step_idx"),
                migrations.AddIndex(
                    model_name="modelcall",
                    index=models.Index(fields=["run", "ts"], name="modelcall_run_ts_idx"),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
