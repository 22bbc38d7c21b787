"""Create the ``operators`` group: its members (and superusers) may act on breakers."""

from __future__ import annotations

from django.db import migrations


def create_operators_group(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.get_or_create(name="operators")


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("breakers", "0004_operators_admin_permissions"),
    ]

    # Reversing leaves the group in place: deleting it would silently drop every membership.
    operations = [migrations.RunPython(create_operators_group, migrations.RunPython.noop)]
