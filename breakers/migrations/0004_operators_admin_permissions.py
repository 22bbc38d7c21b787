"""Give the ``operators`` group the admin permissions the pages send operators to: Slack
channels, tool policies (probes), and a read-only view of what the fleet did."""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

GRANTS = {
    "alertchannel": ("view", "add", "change", "delete"),
    "toolpolicy": ("view", "add", "change", "delete"),
    "tool": ("view", "change"),  # the tool page in the admin holds its policy inline
    "alert": ("view",),
    "fleettransition": ("view",),
    "incident": ("view",),
    "probe": ("view",),
    "operatoraction": ("view",),
}


def grant(apps, schema_editor):
    # Permissions are normally created after all migrations; make sure they exist now.
    # (A migration's app config has no models module; create_permissions only checks it is set.)
    config = apps.get_app_config("breakers")
    config.models_module = True
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="operators")
    codenames = [f"{action}_{model}" for model, actions in GRANTS.items() for action in actions]
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="breakers", codename__in=codenames)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("breakers", "0003_policy_bounds"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
