// DigestClient drives the JDK's own DIGEST-MD5 SaslClient the way Hadoop's
// SaslRpcClient does, so that digestmd5's Go tests can check the Go server
// against it. It is compiled and run by jdk_test.go; it is not shipped.
//
// Usage: java DigestClient <username> <password> <realm|-> [qop]
//   realm "-" answers the RealmCallback with its default (the realm the
//   server offered), as Hadoop's SaslClientCallbackHandler does.
//   qop defaults to "auth" (hadoop.rpc.protection=authentication).
//
// Protocol, one base64 line per message so any bytes survive:
//   stdin  line 1: the server's challenge;  stdout: "RESPONSE <base64>"
//   stdin  line 2: the server's final message ("rspauth=..."), or EOF to stop
//   stdout: "COMPLETE <true|false>"
//   Any SASL failure: "ERROR <class>: <message>[ / caused by <class>: <message>...]"
//   on stdout, exit status 1.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.RealmChoiceCallback;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslClient;
import javax.security.sasl.SaslException;

public final class DigestClient {
  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: DigestClient <username> <password> <realm|-> [qop]");
      System.exit(2);
    }
    final String user = args[0];
    final char[] password = args[1].toCharArray();
    final String realm = args[2];
    final String qop = args.length > 3 ? args[3] : "auth";

    // SaslRpcServer/SaslPropertiesResolver give the client exactly these.
    Map<String, String> props = new HashMap<>();
    props.put(Sasl.QOP, qop);
    props.put(Sasl.SERVER_AUTH, "true");

    // Mirrors SaslRpcClient.SaslClientCallbackHandler.
    CallbackHandler handler = callbacks -> {
      for (Callback cb : callbacks) {
        if (cb instanceof RealmChoiceCallback) {
          continue;
        } else if (cb instanceof NameCallback) {
          ((NameCallback) cb).setName(user);
        } else if (cb instanceof PasswordCallback) {
          ((PasswordCallback) cb).setPassword(password);
        } else if (cb instanceof RealmCallback) {
          RealmCallback rc = (RealmCallback) cb;
          rc.setText(realm.equals("-") ? rc.getDefaultText() : realm);
        } else {
          throw new UnsupportedCallbackException(cb, "Unrecognized SASL client callback");
        }
      }
    };

    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
    try {
      // Hadoop: mechanism list, no authzid, protocol "", serverId "default".
      SaslClient client = Sasl.createSaslClient(
          new String[] {"DIGEST-MD5"}, null, "", "default", props, handler);
      if (client == null) {
        throw new SaslException("no DIGEST-MD5 SaslClient available");
      }
      byte[] response = client.evaluateChallenge(decode(in.readLine()));
      System.out.println("RESPONSE " + Base64.getEncoder().encodeToString(response));
      System.out.flush();
      String line = in.readLine();
      if (line == null) {
        return;
      }
      client.evaluateChallenge(decode(line));
      System.out.println("COMPLETE " + client.isComplete());
    } catch (SaslException e) {
      // One line, causes included: the JDK wraps the telling message.
      StringBuilder msg = new StringBuilder("ERROR ");
      for (Throwable c = e; c != null; c = c.getCause()) {
        msg.append(c == e ? "" : " / caused by ").append(c.getClass().getName()).append(": ").append(c.getMessage());
      }
      System.out.println(msg.toString().replace('\n', ' '));
      System.exit(1);
    }
  }

  private static byte[] decode(String line) throws SaslException {
    if (line == null) {
      throw new SaslException("unexpected end of input");
    }
    return Base64.getDecoder().decode(line.trim());
  }
}
