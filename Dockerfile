FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.lock pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
# Static files are collected (hashed, compressed) at build time; whitenoise serves them.
RUN pip install --no-cache-dir --no-deps -e . \
    && DEBUG=False SECRET_KEY=collectstatic-only-not-a-secret-0123456789abcdefghijklmnop \
       python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --home-dir /app --no-create-home breakerpanel
USER breakerpanel
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=3)"]
CMD ["gunicorn", "-c", "python:controlplane.gunicorn_conf", "controlplane.wsgi:application"]
