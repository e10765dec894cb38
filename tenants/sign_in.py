"""Password sign-in (console and admin) with failed attempts throttled per username and per address.

The backend refuses a locked-out username or address before the password is checked, so every path
through `authenticate()` is covered; the forms turn that refusal into a message that says when to try
again. Failures are counted from Django's `user_login_failed` signal.
"""

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied, ValidationError
from django.dispatch import receiver

from tenants import throttle

_LOCKED_ATTR = "loci_sign_in_locked"  # set on the request by the backend, read by the form and the signal


class ThrottledModelBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        wait = throttle.seconds_locked(throttle.sign_in_counters(username or "", request))
        if wait:
            if request is not None:
                setattr(request, _LOCKED_ATTR, wait)
            raise PermissionDenied  # authenticate() stops at once: no other backend, no password check
        return super().authenticate(request, username=username, password=password, **kwargs)


class _ThrottledLogin:
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password didn’t match. Please try again.",
    }

    def get_invalid_login_error(self):
        wait = getattr(self.request, _LOCKED_ATTR, 0)
        if wait:
            return ValidationError(
                f"Too many failed sign-ins for this account or from your address. "
                f"Try again in {throttle.describe_wait(wait)}.", code="locked")
        return super().get_invalid_login_error()


class SignInForm(_ThrottledLogin, AuthenticationForm):
    pass


class AdminSignInForm(_ThrottledLogin, AdminAuthenticationForm):
    error_messages = {**AdminAuthenticationForm.error_messages,
                      "invalid_login": AdminAuthenticationForm.error_messages["invalid_login"]}


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    if request is not None and getattr(request, _LOCKED_ATTR, 0):
        return  # refused while locked: the window it is in is not extended
    throttle.record_failure(throttle.sign_in_counters(credentials.get("username", ""), request))


@receiver(user_logged_in)
def _reset_username(sender, request, user, **kwargs):
    # Only the account's counter: an address's failures stand, or a guesser could clear them by
    # signing in to an account of their own between guesses.
    throttle.forget(throttle.sign_in_counters(user.get_username(), None))
