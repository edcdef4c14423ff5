"""Four more secret shapes leave the watcher redacted, each with the name kept and only the secret
gone: a password given as a command-line flag (``--password x``), GitLab tokens (``glpat-…``), the
path of a Slack incoming webhook, and Azure connection-string keys (``AccountKey=…;``). Near
misses — prose about passwords, a ``--password-file`` path, Slack's documentation URL, an
``AccountName`` — pass unchanged."""

from __future__ import annotations

import pytest

from controller.contract.redaction import REDACTED, redact, scrub_lines

GITLAB = "glpat-" + "xQ3z_9Kd-2mPw7Lr8TnB"  # glpat- + 20
SLACK_PATH = "T0A1B2C3D/B4E5F6G7H/abcdEFGHijklMNOPqrstUVWX"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.mark.parametrize(
    ("line", "published"),
    [
        (
            "python train.py --password hunter2 --epochs 3",
            f"python train.py --password {REDACTED} --epochs 3",
        ),
        ("python train.py --password=hunter2", f"python train.py --password={REDACTED}"),
        ('mysql --db-password "s3cr3t" -h db', f'mysql --db-password "{REDACTED}" -h db'),
        ("wandb login --api-key 0123456789abcdef", f"wandb login --api-key {REDACTED}"),
        ("hub push --token\tabc.def", f"hub push --token\t{REDACTED}"),
        (f"git clone https://oauth2:{GITLAB}@gitlab.example.com/g/r", "https://oauth2:"),
        (f"GITLAB_TOKEN {GITLAB} set", f"GITLAB_TOKEN {REDACTED} set"),
        (f"runner gldt-{'a1B2c3D4e5' * 2} registered", f"runner {REDACTED} registered"),
        (
            f"curl -X POST https://hooks.slack.com/services/{SLACK_PATH} -d @msg.json",
            f"curl -X POST https://hooks.slack.com/services/{REDACTED} -d @msg.json",
        ),
        (
            f"notify: hooks.slack.com/workflows/{SLACK_PATH}",
            f"notify: hooks.slack.com/workflows/{REDACTED}",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=trainlogs;"
            f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
            "DefaultEndpointsProtocol=https;AccountName=trainlogs;"
            f"AccountKey={REDACTED};EndpointSuffix=core.windows.net",
        ),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
            f"SharedAccessKey={AZURE_KEY}",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
            f"SharedAccessKey={REDACTED}",
        ),
    ],
    ids=[
        "flag-space",
        "flag-equals",
        "flag-prefixed-quoted",
        "flag-api-key",
        "flag-token-tab",
        "gitlab-in-url",
        "gitlab-pat",
        "gitlab-deploy-token",
        "slack-webhook",
        "slack-workflow",
        "azure-storage",
        "azure-service-bus",
    ],
)
def test_the_secret_goes_and_its_name_stays(line: str, published: str) -> None:
    (scrubbed,) = scrub_lines([line])
    assert published in scrubbed, scrubbed
    for secret in (
        "hunter2",
        "s3",
        "0123456789abcdef",
        "abc.def",
        GITLAB,
        SLACK_PATH,
        AZURE_KEY,
        "a1B2c3D4e5",
    ):
        assert secret not in scrubbed, scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "please reset your password via the portal",
        "password reset link sent to alice",
        "the token budget is 4096; secret sauce: none",
        "train.py --password-file /var/run/secrets/db --token-path /tmp/t",
        "kubectl create secret generic db --secret-name foo",
        "cli --password --verbose",
        "glpat-short is not a token",
        "see https://api.slack.com/messaging/webhooks for hooks",
        "hooks.slack.com/services/ without a path",
        "AccountName=trainlogs;EndpointSuffix=core.windows.net",
        "the AccountKey field is required",
    ],
    ids=[
        "prose-reset",
        "prose-link",
        "prose-token",
        "file-flags",
        "secret-name-flag",
        "flag-then-flag",
        "gitlab-too-short",
        "slack-docs",
        "slack-no-path",
        "azure-account-name",
        "azure-prose",
    ],
)
def test_near_misses_pass_unchanged(text: str) -> None:
    assert redact(text) == text
